"""Email agent: answer questions about a synthetic inbox with real tools (search, read, answer) over SQLite FTS5.

inbox.py (generator and store), tools.py (tool schemas and their execution), rollout.py (one episode
through an OpenAI-compatible client, the scripted expert), rewards.py (hand-written rewards and RULER),
train.py (SFT warm-up, GRPO, held-out table).
"""
