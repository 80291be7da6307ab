"""`art ui`'s routes, one module per concern (`art.ui.app` puts them together):

- `shared`   what every route uses: the record reader of the app, the page's base URL, HTML answers
- `assets`   the static files and `/api/version` (what a page polls to refresh itself while a run trains)
- `models`   `/` (the projects and models) and a model's page (charts, steps, checkpoints, comparison)
- `steps`    a step's groups side by side, one trajectory with its neighbours, two steps compared
- `login`    the key guard and `/login` (when `art serve` mounts the ui with its key)
"""
