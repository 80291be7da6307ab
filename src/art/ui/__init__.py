"""`art ui` and `art show`: see what a run learned, from its record, without changing it.

- `record.py`: reading a record folder read-only, lazily and tolerantly (what cannot be read is said).
- `conversation.py`: a recorded trajectory as chat turns and tokens with the trainer's numbers.
- `pages.py` + `static/`: the HTML of the pages (server-rendered; a small script for tooltips and live
  refresh); `app.py`: the FastAPI app (also mounted by `art serve` under `/ui`).
- `show.py`: `art show PATH --step N`, a group in the terminal. The two commands are `art.cli.ui` and
  `art.cli.show`.
"""
