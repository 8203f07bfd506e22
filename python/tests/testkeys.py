"""The keys the shared fixtures' fields carry, for tests to import (`from testkeys import ...`):
importing them from `conftest` breaks when another suite's conftest was loaded under that name
first (`pytest python/tests/core python/tests/pyfdb`)."""

BASE_KEY = {
    "class": "od",
    "expver": "0001",
    "stream": "oper",
    "date": "20261122",
    "time": "1200",
    "type": "fc",
    "levtype": "pl",
}

DB_REQUEST = {k: BASE_KEY[k] for k in ("class", "expver", "stream", "date", "time")}
