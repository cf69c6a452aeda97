"""SillyTavern's World Info rules as a pure engine (issue 25): which
lorebook entries one turn's prompt holds, and where. See worldinfo.records."""
