"""What a user does, as small functions every front end calls: chats, spaces, remembering, forgetting a chat's
memory, chat export, cubes, backups."""
