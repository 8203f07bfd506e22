"""The clean-machine check (scripts/clean-machine-test runs it in a fresh virtualenv, with the
system's ecCodes, eckit, FDB5 libraries and ecCodes definitions hidden): the README's Python quick
start and the `fieldstore` command's demo work from the wheels alone, and the process maps exactly
one ecCodes, eccodeslib's, also when eccodes-python or pyfdb loaded it first.

Mode `data-stack` (earthkit-data and xarray installed beside the wheels) reads the stored fields
through xarray's `engine="fieldstore"` and earthkit-data's `fieldstore` source too.

Usage: python smoke.py plain|eccodes-first|pyfdb-first|data-stack WORKDIR
"""

import ctypes
import os
import subprocess
import sys


def mapped_eccodes():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6:
                name = os.path.basename(parts[5])
                if name == "libeccodes.so" or name.startswith("libeccodes.so."):
                    libs.add(os.path.realpath(parts[5]))
    return sorted(libs)


def main():
    mode, work = sys.argv[1], sys.argv[2]
    # The system's library is really hidden (else this check proves nothing).
    for name in ("libeccodes.so.0", "/usr/lib/x86_64-linux-gnu/libeccodes.so.0"):
        try:
            ctypes.CDLL(name)
        except OSError:
            pass
        else:
            sys.exit(f"FAIL: the system's {name} is still loadable")
    assert not os.path.exists("/usr/share/eccodes/definitions/boot.def"), "definitions not hidden"

    if mode == "eccodes-first":
        import eccodes

        print("eccodes-python first: ecCodes", eccodes.codes_get_api_version())
    elif mode == "pyfdb-first":
        import pyfdb  # ECMWF's: findlibs preloads eccodeslib RTLD_GLOBAL

        print("pyfdb first:", pyfdb.__file__)
    before = mapped_eccodes()

    import fieldstore

    # Importing fieldstore loads no ecCodes.
    assert mapped_eccodes() == before, (before, mapped_eccodes())
    assert fieldstore.eccodes_info(load=False) is None

    # The command's demo, from the wheel's bin/ (its ecCodes: the same wheel's).
    bindir = os.path.dirname(sys.executable)
    fs = os.path.join(bindir, "fieldstore")
    root = os.path.join(work, "root")
    os.makedirs(root, exist_ok=True)
    cfg = os.path.join(work, "config.yaml")
    with open(cfg, "w") as f:
        f.write(f"type: local\nengine: toc\nspaces:\n- roots:\n  - path: {root}\n")
    env = dict(os.environ, FDB5_CONFIG_FILE=cfg)
    grib = os.path.join(work, "s.grib")
    run = lambda *a: subprocess.run([fs, *a], env=env, check=True, capture_output=True, text=True)
    run("sample", "--out", grib)
    info = run("info").stdout
    assert "from the eccodeslib wheel" in info and "site-packages/eccodeslib" in info, info
    run("write", grib)
    listed = run("list", "class=od,param=130").stdout
    assert listed.count("param=130") == 9, listed
    one = os.path.join(work, "one.grib")
    run("read", "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,"
        "levelist=500,param=130,step=0", one)
    assert open(one, "rb").read(4) == b"GRIB"
    # FDB5's tool names, on request, beside the command.
    tools = os.path.join(work, "fdb-tools")
    run("install-fdb-tools", tools)
    fdb_list = subprocess.run([os.path.join(tools, "fdb-list"), "--porcelain",
                               "class=od,expver=0001,param=130"],
                              env=env, capture_output=True, text=True)
    assert fdb_list.returncode == 0, fdb_list.stderr
    assert fdb_list.stdout.count("param=130") == 9, fdb_list.stdout
    # `python -m fieldstore` is the same command (the wheel's program, or the sdist's in-process
    # one).
    by_module = subprocess.run([sys.executable, "-m", "fieldstore", "list", "class=od,param=130"],
                               env=env, check=True, capture_output=True, text=True).stdout
    assert by_module == listed, (by_module, listed)
    bad = subprocess.run([fs, "list", "nonsense=1"], env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "unknown keyword" in bad.stderr, bad

    # The README's quick start (a config of our own instead of the default store).
    fdb = fieldstore.FDB({"type": "local", "engine": "toc", "spaces": [{"roots": [{"path": root}]}]})
    fdb.archive(open(grib, "rb").read())
    fdb.flush()
    axes = fdb.axes({"class": "od", "expver": "0001"})
    assert "130" in str(axes), axes
    values = fdb.retrieve(
        "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,"
        "param=t,levelist=500,step=0/6/12"
    ).to_numpy()
    assert values.shape[0] == 3, values.shape

    if mode == "data-stack":
        import earthkit.data as ekd
        import xarray as xr

        config = {"type": "local", "engine": "toc", "spaces": [{"roots": [{"path": root}]}]}
        request = {"class": "od", "expver": "0001", "stream": "oper", "date": "20261122",
                   "time": "1200", "type": "fc", "levtype": "pl", "param": "t"}
        ds = xr.open_dataset(request, engine="fieldstore", config=config)
        sizes = dict(ds["t"].sizes)
        assert sizes.get("step") == 3 and sizes.get("isobaricInhPa") == 3, sizes
        fl = ekd.from_source("fieldstore", request, config=config).to_fieldlist()
        assert len(fl) == 9, len(fl)
        assert fl.to_numpy().shape[0] == 9
        print(f"data stack: xarray {xr.__version__} {dict(ds['t'].sizes)}, earthkit-data "
              f"{ekd.__version__} {len(fl)} fields")

    info = fieldstore.eccodes_info()
    libs = mapped_eccodes()
    assert len(libs) == 1, f"{len(libs)} ecCodes mapped: {libs}"
    assert "/site-packages/eccodeslib/" in libs[0], libs
    assert info["path"] == libs[0], (info, libs)
    if mode in ("eccodes-first", "pyfdb-first"):
        assert info["origin"] == "already loaded in the process", info
    print(f"ok ({mode}): Python {sys.version.split()[0]}, ecCodes {info['version']} {info['origin']}, "
          f"one library mapped: {libs[0]}; values {values.shape}")


main()
