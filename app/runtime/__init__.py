"""What runs the app: the background scheduler and task threads, building backends, the instance lock."""
