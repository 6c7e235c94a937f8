"""``ctxwatch watch``: follow coding-agent session files (Claude Code, Codex, Gemini CLI) as they are
written and export the spans a guard would have emitted, timed as recorded in the files.

One job per module: `discovery` (which files, where the agents keep them), `identity` (loop id,
agent, version and the bounded project label of a session), `tail` (complete lines of a growing
file), `live` (one session audited incrementally: the replay's readers and audit, fed line by
line), `follower` (one file: start, wake, evict, resume, truncation and deletion), `checkpoint` (the
text-free audit state a session resumes from at its current epoch), `state` (the offsets, span counts
and resume points that survive a restart), `command` (the options and the daemon loop).
"""
