"""Start an os-ken app on 127.0.0.1:<port>: `python -m controller.launch --port P --config F APP`.

APP is `learning`, `steering`, or a path to a user's app file. Works with
Debian's python3-os-ken and with PyPI os-ken (which has no manager script):
it drives os_ken.base.app_manager.AppManager directly, as osken-manager does.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

APPS = {"learning": "controller.learning", "steering": "controller.steering"}


def user_app_path(app: str, base_dir: Path) -> Path | None:
    """None for our own apps; else the user's app file, relative to the scenario's folder."""
    if app in APPS:
        return None
    return Path(app) if Path(app).is_absolute() else Path(base_dir) / app


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m controller.launch", description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=6653)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--config", help="JSON config handed to the app ($TESTBED_CONTROLLER_CONFIG)")
    ap.add_argument("app")
    args = ap.parse_args(argv)
    if args.config:
        os.environ["TESTBED_CONTROLLER_CONFIG"] = os.path.abspath(args.config)
    app = APPS.get(args.app, args.app)
    if app.endswith(".py") and not os.path.isfile(app):
        print(f"controller: no app file {app}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from os_ken import cfg
    # eventlet's greenio imports pyOpenSSL where it is installed, for its exception classes only (1.7 of
    # the controller's 13 s to listen in a TCG guest, `python -X importtime`, 2026-11-28); os-ken's
    # OpenFlow listener is plain TCP here. Kept out while eventlet loads, importable again afterwards,
    # should a user's app want it.
    blocked = "OpenSSL" not in sys.modules
    if blocked:
        sys.modules["OpenSSL"] = None
    try:
        from os_ken.lib import hub
    finally:
        if blocked:
            del sys.modules["OpenSSL"]
    hub.patch(thread=True)
    from os_ken.base.app_manager import AppManager
    import os_ken.controller.controller  # noqa: F401  (registers the OpenFlow listen options)
    cfg.CONF(args=["--ofp-listen-host", args.host, "--ofp-tcp-listen-port", str(args.port)],
             project="os_ken", default_config_files=[])
    logging.getLogger(__name__).info("starting %s on %s:%d", app, args.host, args.port)
    AppManager.run_apps([app])
    return 0


if __name__ == "__main__":
    sys.exit(main())
