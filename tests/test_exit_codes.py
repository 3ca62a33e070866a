"""The exit-code table (store/exit_codes.py) is the one home of the exit codes: the error
classes, `report()`, the README's table and the man page's EXIT STATUS all come from it, and
a new entry reaches all of them with no other edit."""

from __future__ import annotations

import importlib
import io
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mqcli
import store
from mqcli.exits import Declined, Failed, UsageError, report
from mqcli.signals import Terminated
from store import errors
from store.errors import StoreError
from store.exit_codes import ExitCode, Status, statuses

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from gendocs.readme import BEGIN, END, exit_code_table  # noqa: E402


def _all_store_errors() -> list[type[StoreError]]:
    """Every StoreError subclass defined anywhere in store/ and mqcli/ (each module imported)."""
    for package in (store, mqcli):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if module.name == "store.analytics.job":  # a Spark job's __main__, run by spark-submit
                continue
            importlib.import_module(module.name)
    found: list[type[StoreError]] = []
    todo = [StoreError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                todo.append(sub)
    return found


ERROR_CLASSES = _all_store_errors()


def _report(exc: BaseException) -> tuple[int, dict, str]:
    as_json, as_text = io.StringIO(), io.StringIO()
    code = report(exc, json_errors=True, stream=as_json)
    assert report(exc, json_errors=False, stream=as_text) == code
    return code, json.loads(as_json.getvalue())["error"], as_text.getvalue()


def _exit_status_section() -> str:
    page = (ROOT / "man" / "mqcli.1").read_text(encoding="utf-8")
    return page.split(".SH EXIT STATUS\n", 1)[1].split("\n.SH ", 1)[0]


def test_exit_codes_keep_their_numbers():
    # scripts test these numbers: a change here breaks them
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0, "INTERNAL": 1, "USAGE": 2, "TIMEOUT": 3, "NOT_FOUND": 4, "ALREADY_RECEIVED": 5,
        "QUEUE_NOT_AVAILABLE": 6, "QUEUE_QUOTA": 7, "STORE_QUOTA": 8, "EXPIRED": 9,
        "TRANSACTION": 10, "STORE": 11, "BAD_DATA": 12, "CHANNEL": 13, "ANALYSIS_FAILED": 14, "INTERRUPTED": 130,
        "OUTPUT_CLOSED": 141, "TERMINATED": 143}


def test_every_store_error_is_importable_from_store_errors():
    assert len(ERROR_CLASSES) > 40
    elsewhere = [f"{cls.__module__}.{cls.__name__}" for cls in ERROR_CLASSES
                 if getattr(errors, cls.__name__, None) is not cls]
    assert elsewhere == []


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda cls: cls.__name__)
def test_report_of_each_error_class_gives_the_tables_code_and_status(cls):
    exc = cls.__new__(cls)  # whatever its constructor takes: report reads the class and message
    exc.message = "what went wrong"
    code, obj, line = _report(exc)
    assert code == cls.entry.exit and code in set(ExitCode)
    assert cls.entry in statuses(ExitCode(code))
    assert obj == {"status": cls.entry.name, "code": cls.entry.code, "exit": code,
                   "message": "what went wrong"}
    assert line == f"mqcli: error: what went wrong [{cls.entry.name}]\n"
    assert (cls.status, cls.code, cls.exit_code) == (cls.entry.name, cls.entry.code, cls.entry.exit)


@pytest.mark.parametrize("exc, status, code", [
    (UsageError("bad"), Status.USAGE, ExitCode.USAGE),
    (Declined("not purged"), Status.DECLINED, ExitCode.INTERNAL),
    (KeyboardInterrupt(), Status.INTERRUPTED, ExitCode.INTERRUPTED),
    (Terminated(), Status.INTERRUPTED, ExitCode.TERMINATED),
    (ZeroDivisionError("x"), Status.INTERNAL, ExitCode.INTERNAL),
    (Failed(ExitCode.NOT_FOUND, Status.BATCH, "batch: line 2 failed (exit 4): confirm q"), Status.BATCH,
     ExitCode.NOT_FOUND),
], ids=["usage", "declined", "interrupted", "terminated", "internal", "batch"])
def test_report_of_the_cli_errors_gives_the_tables_code_and_status(exc, status, code):
    got, obj, line = _report(exc)
    assert (got, obj["status"], obj["code"], obj["exit"]) == (code, status.name, status.code, code)
    assert line.endswith(f" [{status.name}]\n")


def test_hresults_are_msmq_facility_codes_shown_in_hex():
    for status in Status:
        if status.hresult is not None and status is not Status.MQ_OK:
            assert status.hresult >> 16 == 0xC00E, status  # severity error, facility MSMQ
            assert re.fullmatch(r"0xC00E[0-9A-F]{4}", status.code or ""), status
    assert Status.MQ_ERROR_IO_TIMEOUT.code == "0xC00E001B"


def test_readme_exit_code_table_is_the_one_generated_from_the_table():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(BEGIN + "\n", 1)[1].split(END, 1)[0]
    assert section == exit_code_table()
    rows = [line for line in section.splitlines()[2:]]
    assert [int(row.split("|")[1]) for row in rows] == [int(code) for code in ExitCode]
    for status in Status:
        if status.exits:
            assert status.shown in section, status


def test_man_page_lists_every_exit_code_and_every_status():
    section = _exit_status_section()
    for code in ExitCode:
        assert f".TP\n\\fB{int(code)}\\fR  {code.name}\n" in section, code
    for status in Status:
        assert status.name in section, status
        if status.exits:
            assert status.shown in section, status
    for cls in ERROR_CLASSES:
        assert cls.status in section, cls


_SPARE = '''
import io, sys, types
source = open("store/exit_codes.py", encoding="utf-8").read()
source = source.replace("\\n\\n\\nclass Status(Enum):",
                        '\\n    SPARE = 99, "A spare exit code for this test."\\n\\n\\nclass Status(Enum):', 1)
source = source.replace("\\n    @property\\n    def exit(",
                        "    MQ_SPARE = 0xC00E00FF, ExitCode.SPARE\\n\\n    @property\\n    def exit(", 1)
module = types.ModuleType("store.exit_codes")
exec(compile(source, "store/exit_codes.py", "exec"), module.__dict__)
sys.modules["store.exit_codes"] = module  # before the store imports it
sys.path.insert(0, "scripts")

from store.errors import StoreError
from store.exit_codes import Status
from mqcli.exits import report
from gendocs.man import Page, exit_status
from gendocs.readme import exit_code_table


class Spare(StoreError):
    entry = Status.MQ_SPARE


line = io.StringIO()
print(report(Spare("spare"), json_errors=False, stream=line), line.getvalue(), end="")
print([row for row in exit_code_table().splitlines() if "SPARE" in row])
page = Page("mqcli", "mqcli", "test")
exit_status(page)
print([line for line in page.render().splitlines() if "SPARE" in line])
'''


def test_a_new_entry_reaches_report_readme_and_man_with_no_other_edit():
    result = subprocess.run([sys.executable, "-c", _SPARE], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "99 mqcli: error: spare [MQ_SPARE]",
        "['| 99 | SPARE | MQ_SPARE (0xC00E00FF) | A spare exit code for this test. |']",
        "['\\\\fB99\\\\fR  SPARE', 'A spare exit code for this test. Status: MQ_SPARE (0xC00E00FF).']",
    ]
