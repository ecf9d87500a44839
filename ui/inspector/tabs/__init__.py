"""The memory inspector's tabs, one module each: its view and the table models only it uses.

Overview, Pages, Topics (segments), Profile (persona) and Recall (the retrieval trace); the Saved
memories, Prompt, Adapters and Activation tabs are the modules beside this package. What the tabs
share is in `common` (buttons, search box, pin and forget) and in ui.inspector.models / .columns.

What they show is in plain words (app.wording); the memory core's own terms and figures (heat formula,
cosines, the tier names of its papers) appear only with the panel's Details switch (`set_details`).
Each view reads through the panel's worker (`panel.worker.submit(fn, done)`: `fn(store)` runs on the
worker thread, `done(result)` back in the UI thread) and changes memory only through the
memory core's management API (edit_*, pin, forget, set_paused, wipe_memory).
"""
