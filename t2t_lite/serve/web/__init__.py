"""`t2t-serve`: a local web page and JSON API over a training run or a SavedModel.

`app` (the FastAPI application and its routes), `api` (requests, responses, limits, errors),
`backend` with `run_backend` and `saved_model_backend` (where translations and attention come
from), `trees` (parse trees as JSON, one sentence's EVALB), `server` (what the command does), and
`static/` (the page: HTML, CSS and JavaScript, served as they are).
"""
