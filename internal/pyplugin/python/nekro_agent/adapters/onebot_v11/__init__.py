"""OneBot v11, as plugins reach it (core.bot.get_bot)."""
