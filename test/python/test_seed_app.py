"""A test suite of the seed app with FastAPI's TestClient, as a project's CI
runs it: `doubletake verify -- pytest` catches the double export there."""

from fastapi.testclient import TestClient

from seed_app import app


def test_items():
    # The context manager runs the ASGI lifespan: FastAPI 0.142's
    # auto-configuration at startup, the app's flush at shutdown.
    with TestClient(app) as client:
        for i in range(1, 6):
            r = client.get(f"/items/{i}")
            assert r.status_code == 200
            assert r.json()["item_id"] == i
        assert client.get("/items/abc").status_code == 422
