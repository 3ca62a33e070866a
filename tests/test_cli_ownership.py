"""CLI, as root next to another local user: a store directory, a key file and mqcli's Spark
log folder that the other user made are refused with exit 11 naming that user, and a store
that user forged is never read (store/ownership.py).

Needs root, `useradd`, `runuser` and `userdel`: it makes a throwaway user and removes it after;
skipped with the reason where any of that is not allowed."""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from cli_helpers import ERROR_PREFIX, Cli, run_mqcli

pytestmark = pytest.mark.slow  # makes and removes a user account


@pytest.fixture(scope="module")
def neighbour():
    """A throwaway unprivileged user: (name, uid)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a throwaway user (useradd) and act as it (runuser)")
    for tool in ("useradd", "runuser", "userdel"):
        if shutil.which(tool) is None:
            pytest.skip(f"`{tool}` is not installed here")
    name = f"mqt{secrets.token_hex(3)}"
    made = subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name],
                          capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        pytest.skip(f"useradd is not allowed here: {made.stderr.strip()}")
    try:
        probe = subprocess.run(["runuser", "-u", name, "--", "true"], capture_output=True, text=True, timeout=30)
        if probe.returncode != 0:
            pytest.skip(f"runuser is not allowed here: {probe.stderr.strip()}")
        import pwd

        yield name, pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True, timeout=30)


@pytest.fixture
def shared():
    """A sticky, world-writable folder like /tmp (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="mqcli-own-", dir="/tmp"))
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def as_user(user: str, *command: str) -> None:
    subprocess.run(["runuser", "-u", user, "--", *command], check=True, capture_output=True, timeout=30)


def refused_naming(r, user: str, uid: int) -> str:
    assert r.code == 11, r
    errors = [line for line in r.err_lines if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1 and errors[0].endswith("[MQ_ERROR_ACCESS_DENIED]"), r
    assert f"owned by {user} (uid {uid})" in errors[0], r
    return errors[0]


def test_a_store_directory_another_user_made_is_refused_by_init_and_left_as_it_was(neighbour, shared):
    user, uid = neighbour
    trap = shared / "qm1"
    as_user(user, "mkdir", "-m", "700", str(trap))
    for args in (["init"], ["init", "--name", "payroll"], ["--allow-foreign-owner", "init"]):
        refused_naming(run_mqcli(["--store", trap, *args]), user, uid)
    st = trap.stat()
    assert os.listdir(trap) == [] and st.st_uid == uid and stat.S_IMODE(st.st_mode) == 0o700


def test_a_forged_store_another_user_swapped_in_is_never_read(neighbour, shared, tmp_path):
    user, uid = neighbour
    # the forgery: a whole store with a "payroll" message, handed over to the other user
    forged = Cli(tmp_path / "forged", tmp_path / "xdg")
    forged.subprocess("init", "-q")
    forged.subprocess("queue", "create", "payroll", "-q")
    assert forged.subprocess("put", "payroll", "FORGED: pay mallory", "-q").code == 0
    trap = shared / "qm1"
    as_user(user, "mkdir", "-m", "700", str(trap))
    for name in os.listdir(forged.store):
        if os.path.isfile(forged.store / name):
            shutil.copyfile(forged.store / name, trap / name)
    subprocess.run(["chown", "-R", f"{user}:", str(trap)], check=True)
    os.chmod(trap, 0o700)
    readers = [["get", "payroll"], ["browse", "payroll"], ["info"], ["check"], ["stats"], ["export"],
               ["queue", "list"], ["backup", str(tmp_path / "copy")], ["snapshot", str(tmp_path / "snaps")],
               ["put", "payroll", "root's secret"], ["init"]]
    if importlib.util.find_spec("pyspark") is not None:  # refused before Spark starts
        readers.append(["analyze", "health"])
    for args in readers:
        r = run_mqcli(["--store", trap, *args])
        refused_naming(r, user, uid)
        assert b"FORGED" not in r.stdout and "FORGED" not in r.stderr
    assert os.stat(trap / "data.mdb").st_uid == uid  # root's put wrote nothing into it
    assert not (tmp_path / "copy").exists() and not (tmp_path / "snaps").exists()
    # the refusal is what kept it out: root who says so reads the forgery (the test can fail)
    said = run_mqcli(["--store", trap, "--allow-foreign-owner", "browse", "payroll", "-o", "body"])
    assert said.code == 0 and said.stdout == b"FORGED: pay mallory\n", said
    assert said.err_lines == [f"mqcli: warning: using the store at {trap}, owned by {user} (uid {uid}) "
                              f"(--allow-foreign-owner)"], said
    # and so do the lines of a batch it runs (they were refused: the switch stayed with the batch)
    batch = run_mqcli(["--store", trap, "--allow-foreign-owner", "batch"], input=b"browse payroll -o body\ninfo -q\n")
    assert batch.code == 0 and batch.stdout.startswith(b"FORGED: pay mallory\n"), batch
    assert batch.err_lines == said.err_lines, batch
    refused = run_mqcli(["--store", trap, "batch"], input=b"browse payroll -o body\n")
    assert refused.code == 11 and refused.stdout == b"" and f"owned by {user} (uid {uid})" in refused.err_lines[0], refused


def test_a_key_file_another_user_owns_is_refused(neighbour, shared, tmp_path):
    user, uid = neighbour
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    assert cli.subprocess("init", "-q").code == 0
    key = shared / "qm2.key"
    as_user(user, "sh", "-c", f"umask 077; printf '%064x\\n' 7 > {key}")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600  # the mode alone would pass
    refused_naming(cli.subprocess("link", "add", "qm2", "127.0.0.1:7000", "--key-file", key), user, uid)
    refused_naming(cli.subprocess("listen", "--bind", "127.0.0.1:7999", "--key-file", key), user, uid)
    assert cli.subprocess("link", "list", "-o", "json").json() == []
    # a symbolic link where the key file belongs is refused too, even to root's own key
    own = tmp_path / "own.key"
    assert cli.subprocess("link", "keygen", own, "-q").code == 0
    link = shared / "link.key"
    as_user(user, "ln", "-s", str(own), str(link))
    r = cli.subprocess("link", "add", "qm2", "127.0.0.1:7000", "--key-file", link)
    assert r.code == 11 and "symbolic link" in r.stderr, r
    assert cli.subprocess("link", "add", "qm2", "127.0.0.1:7000", "--key-file", own, "-q").code == 0


def test_a_spark_log_folder_another_user_made_is_refused_and_not_written_into(neighbour, shared, tmp_path):
    pytest.importorskip("pyspark")
    user, uid = neighbour
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    assert cli.subprocess("init", "-q").code == 0
    folder = shared / f"mqcli-spark-{os.getuid()}"
    as_user(user, "mkdir", "-m", "777", str(folder))
    r = cli.subprocess("analyze", "health", env={"TMPDIR": str(shared)}, timeout=120)
    if r.code == 2 and "Java" in r.stderr:
        pytest.skip(f"analyze cannot run here: {r.stderr.strip()}")
    refused_naming(r, user, uid)
    assert os.listdir(folder) == []
    # root's own folder, opened to others, is refused as well
    shutil.rmtree(folder)
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o777)
    r = cli.subprocess("analyze", "health", env={"TMPDIR": str(shared)}, timeout=120)
    assert r.code == 11 and "chmod 700" in r.stderr, r
    assert os.listdir(folder) == []


def test_a_spark_task_refuses_a_store_swapped_in_after_planning(neighbour, shared, tmp_path):
    """The planning accepted root's store; a task that then finds a store of another user at
    that path (same GUID even: a copy) reads nothing of it: exit 11 naming the owner and host."""
    pytest.importorskip("pyarrow")
    from store.analytics.locate import open_planned, planned
    from store.analytics.scan import plan, read_range

    user, uid = neighbour
    cli = Cli(shared / "qm1", tmp_path / "xdg")
    cli.subprocess("init", "-q")
    cli.subprocess("queue", "create", "payroll", "-q")
    assert cli.subprocess("put", "payroll", "pay alice", "-q").code == 0
    where = planned(cli.store)
    ranges = plan([cli.store])
    assert where.owner == os.geteuid() and sum(b.num_rows for r in ranges for b in read_range(r)) == 1
    # the swap: the same store's files, now the other user's (a copy they control)
    os.rename(cli.store, shared / "qm1.real")
    as_user(user, "mkdir", "-m", "700", str(cli.store))
    for name in os.listdir(shared / "qm1.real"):
        if os.path.isfile(shared / "qm1.real" / name):
            shutil.copyfile(shared / "qm1.real" / name, cli.store / name)
    subprocess.run(["chown", "-R", f"{user}:", str(cli.store)], check=True)
    for attempt in (lambda: open_planned(where).__enter__(), lambda: list(read_range(ranges[0]))):
        with pytest.raises(Exception) as refused:
            attempt()
        from store.analytics.locate import unwire

        line = unwire(str(refused.value))
        assert line is not None and f"owned by {user} (uid {uid})" in line and "executor host" in line, line
        assert refused.value.exit_code == 11  # type: ignore[attr-defined]
    # planning itself refuses it now, naming the owner
    r = run_mqcli(["--store", cli.store, "analyze", "health"]) if importlib.util.find_spec("pyspark") else None
    if r is not None:
        refused_naming(r, user, uid)


def test_a_snapshot_another_user_left_is_refused_unless_root_says_so(neighbour, shared, tmp_path):
    pytest.importorskip("pyarrow")
    from store.analytics import snapshots
    from store.analytics.locate import local_copy, unwire

    user, uid = neighbour
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    cli.subprocess("init", "-q")
    cli.subprocess("queue", "create", "payroll", "-q")
    snaps = shared / "snaps"
    snaps.mkdir(mode=0o755)
    assert cli.subprocess("snapshot", snaps, "-q").code == 0
    (ours,) = snapshots.identities(snaps)
    assert ours.owner == os.geteuid()
    subprocess.run(["chown", "-R", f"{user}:", str(snaps)], check=True)  # now the other user's
    with pytest.raises(Exception) as refused:
        snapshots.identities(snaps)
    assert refused.value.exit_code == 11 and f"owned by {user} (uid {uid})" in str(refused.value)  # type: ignore[attr-defined]
    # a task given root's plan finds the other user's files: refused, never copied
    with pytest.raises(Exception) as refused:
        local_copy(ours)
    line = unwire(str(refused.value))
    assert line is not None and f"owned by {user} (uid {uid})" in line, refused.value
    # root who says so reads it; its tasks then check that user's ownership
    (theirs,) = snapshots.identities(snaps, allow_foreign=True)
    assert theirs.owner == uid and local_copy(theirs).is_dir()
    r = cli.subprocess("analyze", "health", "--snapshots", snaps) if importlib.util.find_spec("pyspark") else None
    if r is not None:
        refused_naming(r, user, uid)


def test_a_textfile_or_export_through_another_users_link_is_refused_and_its_target_untouched(
        neighbour, shared, tmp_path):
    """The other user plants `mqcli.prom -> a file of root's` in a folder of theirs (the
    collector's) or in a sticky one: root's `stats --textfile` and `export --to` refuse it with
    exit 2 naming the link and its owner, and write nothing; a link of root's is followed."""
    user, uid = neighbour
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    assert cli.subprocess("init", "-q").code == 0
    assert cli.subprocess("queue", "create", "q", "-q").code == 0
    assert cli.subprocess("put", "q", "secret", "-q").code == 0
    (tmp_path / "private").mkdir(mode=0o700)
    victim = tmp_path / "private" / "victim.conf"
    victim.write_text("root's own settings\n")
    victim.chmod(0o600)
    collector = shared / "textfile"
    as_user(user, "mkdir", "-m", "755", str(collector))
    for link in (collector / "mqcli.prom", shared / "mqcli.prom"):
        as_user(user, "ln", "-s", str(victim), str(link))
        for args in (["stats", "--prometheus", "--textfile", link], ["export", "--to", link]):
            r = cli.subprocess(*args)
            assert r.code == 2 and r.stdout == b"", r
            assert r.err_lines == [f"mqcli: error: not writing {link}: it leads through the symbolic link "
                                   f"{link}, owned by {user} (uid {uid}), who could point it at any file; only "
                                   f"links of yours, or root's in root's directories, are followed [USAGE]"], r
            assert victim.read_text() == "root's own settings\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
            assert link.is_symlink() and sorted(os.listdir(link.parent)) == sorted(
                [link.name] + (["textfile"] if link.parent == shared else []))
    # a folder on the way that is the other user's link is refused as well
    as_user(user, "ln", "-s", str(tmp_path / "private"), str(shared / "conf"))
    r = cli.subprocess("stats", "--prometheus", "--textfile", shared / "conf" / "victim.conf")
    assert r.code == 2 and f"the symbolic link {shared / 'conf'}, owned by {user} (uid {uid})" in r.stderr, r
    assert victim.read_text() == "root's own settings\n"
    # root's own link is written through (the file it leads to replaced, the link kept)
    ours = tmp_path / "ours.prom"
    ours.symlink_to(tmp_path / "metrics.prom")
    assert cli.subprocess("stats", "--prometheus", "--textfile", ours).code == 0
    assert ours.is_symlink() and (tmp_path / "metrics.prom").read_text().startswith("# HELP")


def test_a_backup_or_snapshot_under_a_directory_another_user_may_change_is_refused_before_copying(
        neighbour, shared, tmp_path):
    """As init refuses a store there: the other user could swap the copy being built for a
    link to a store of theirs (which root would then mark and name its backup). Exit 11 naming
    the directory and its owner, nothing made in it; a sticky folder (/tmp) is fine."""
    user, uid = neighbour
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    assert cli.subprocess("init", "-q").code == 0
    assert cli.subprocess("queue", "create", "q", "-q").code == 0
    assert cli.subprocess("put", "q", "secret", "-q").code == 0
    theirs = shared / "theirs"
    as_user(user, "mkdir", "-m", "755", str(theirs))
    for args, made in ((["backup", theirs / "bk"], "backup"), (["backup", theirs / "deep" / "bk"], "backup"),
                       (["snapshot", theirs], "snapshot"), (["snapshot", theirs / "snaps"], "snapshot")):
        r = cli.subprocess(*args)
        line = refused_naming(r, user, uid)
        assert line == (f"mqcli: error: {theirs} is owned by {user} (uid {uid}), who could swap the {made} made "
                        f"under it; make the {made} in a directory of your own [MQ_ERROR_ACCESS_DENIED]"), r
        assert os.listdir(theirs) == [], args
    opened = tmp_path / "opened"  # root's, but anyone may rename what is in it
    opened.mkdir()
    opened.chmod(0o777)
    for args in (["backup", opened / "bk"], ["snapshot", opened]):
        r = cli.subprocess(*args)
        assert r.code == 11 and f"{opened} may be written by others (mode 777)" in r.stderr, r
        assert os.listdir(opened) == [], args
    assert cli.subprocess("backup", shared / "bk", "-q").code == 0
    assert cli.subprocess("snapshot", shared / "snaps", "-q").code == 0
    assert cli.subprocess("--store", shared / "bk", "check", "-q").code == 0
