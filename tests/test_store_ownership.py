"""The library's ownership checks (store/ownership.py), on real files: what is checked is
the file opened, a link where a store file belongs is refused, and a store swapped between
the check and LMDB's open is refused. (tests/test_cli_ownership.py plays the other user.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from store import Store, errors
from store.ownership import check_store

OTHER_UID = 54321  # no account needed: the owner is named by uid then

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another uid")


def test_a_store_swapped_between_the_check_and_the_open_is_refused(tmp_path):
    path = tmp_path / "qm"
    Store.open(path, create=True, name="real").close()
    checked = check_store(path)
    os.rename(path, tmp_path / "moved")  # someone who may write to the parent swaps the store
    Store.open(path, create=True, name="swapped").close()
    with pytest.raises(errors.StorePermission, match="changed while it was being opened"):
        checked.verify_unchanged()
    shutil.rmtree(path)
    os.rename(tmp_path / "moved", path)
    checked.verify_unchanged()  # the very directory and files checked: nothing to say
    shutil.copyfile(path / "data.mdb", tmp_path / "copy.mdb")
    os.replace(tmp_path / "copy.mdb", path / "data.mdb")  # the same bytes, another file
    with pytest.raises(errors.StorePermission, match="changed while it was being opened"):
        checked.verify_unchanged()


def test_a_symbolic_link_in_place_of_a_store_file_is_refused(tmp_path):
    path = tmp_path / "qm"
    Store.open(path, create=True).close()
    os.rename(path / "data.mdb", tmp_path / "elsewhere.mdb")
    os.symlink(tmp_path / "elsewhere.mdb", path / "data.mdb")
    with pytest.raises(errors.StorePermission, match=r"data.mdb is a symbolic link"):
        Store.open(path)


def test_a_store_reached_through_a_symbolic_link_opens(tmp_path):
    Store.open(tmp_path / "qm", create=True, name="linked").close()
    os.symlink(tmp_path / "qm", tmp_path / "link")
    with Store.open(tmp_path / "link") as st:
        assert st.info().name == "linked"


def test_opening_a_missing_store_creates_nothing(tmp_path):
    with pytest.raises(errors.StoreUnavailable, match=r"no store at .*; create it with `mqcli init --store "):
        Store.open(tmp_path / "a" / "b")
    assert os.listdir(tmp_path) == []


@root_only
def test_a_store_file_another_uid_owns_is_refused_naming_it(tmp_path):
    path = tmp_path / "qm"
    Store.open(path, create=True).close()
    os.chown(path / "lock.mdb", OTHER_UID, OTHER_UID)
    with pytest.raises(errors.ForeignOwner, match=rf"lock.mdb is owned by uid {OTHER_UID}, not by root \(uid 0\)"):
        Store.open(path)
    with pytest.raises(errors.ForeignOwner):  # a third user's file in root's own store
        Store.open(path, allow_foreign_owner=True)


@root_only
def test_root_opens_another_uids_store_only_when_allowed_and_the_handle_says_whose(tmp_path):
    path = tmp_path / "qm"
    Store.open(path, create=True, name="theirs").close()
    for name in [path, *path.iterdir()]:
        os.chown(name, OTHER_UID, OTHER_UID)
    with pytest.raises(errors.ForeignOwner, match=rf"the store directory {path} is owned by uid {OTHER_UID}"):
        Store.open(path)
    with Store.open(path, allow_foreign_owner=True) as st:
        assert st.foreign_owner == f"uid {OTHER_UID}" and st.info().name == "theirs"


@root_only
@pytest.mark.parametrize("parent", ["another uid's", "others may write", "sticky, others may write"])
def test_no_store_is_made_under_a_directory_another_user_may_change(tmp_path, parent):
    # whoever may rename entries in a directory above the store swaps it for a link while
    # root's init makes it (root then wrote its marker into a directory the swapper named) or
    # later (root's commands then used another of root's stores)
    above = tmp_path / "above"
    above.mkdir(mode=0o755)
    if parent == "another uid's":
        os.chown(above, OTHER_UID, OTHER_UID)
    else:
        os.chmod(above, 0o1777 if parent.startswith("sticky") else 0o777)
    if parent.startswith("sticky"):  # as /tmp: no one renames another's entries there
        Store.open(above / "qm", create=True).close()
        return
    with pytest.raises(errors.StorePermission, match=f"{above} .*could swap the store"):
        Store.open(above / "deeper" / "qm", create=True)
    assert os.listdir(above) == []


@root_only
def test_root_opening_another_users_store_opens_its_files_as_that_user(tmp_path, monkeypatch):
    # the owner swaps lock.mdb for a link to a file of root's between the checks and LMDB's
    # open (here: at the worst moment, deterministically); LMDB truncated and wrote root's file
    import tempfile

    import store.environment

    reachable = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's tmp_path is root's alone
    try:
        os.chmod(reachable, 0o755)
        path = reachable / "qm"
        Store.open(path, create=True).close()
        for name in [path, *path.iterdir()]:
            os.chown(name, OTHER_UID, OTHER_UID)
        victim = tmp_path / "roots-file"
        victim.write_text("root's data")
        os.chmod(tmp_path, 0o755)
        real_reserve = store.environment.reserve_lock_file

        def swapped(where):  # the last look at lock.mdb before LMDB opens it by path
            real_reserve(where)
            os.rename(path / "lock.mdb", path / "moved")
            os.symlink(victim, path / "lock.mdb")

        monkeypatch.setattr(store.environment, "reserve_lock_file", swapped)
        with pytest.raises((errors.StorePermission, errors.StoreUnavailable)):
            Store.open(path, allow_foreign_owner=True)
        assert victim.read_text() == "root's data" and os.geteuid() == 0 and os.getegid() == 0
        monkeypatch.undo()
        os.replace(path / "moved", path / "lock.mdb")
        with Store.open(path, allow_foreign_owner=True) as st:  # unswapped: opened, as before
            assert st.foreign_owner == f"uid {OTHER_UID}" and st.queue_info("dead-letter").depth == 0
        assert os.geteuid() == 0 and os.getegid() == 0
    finally:
        shutil.rmtree(reachable)


@root_only
def test_no_store_is_made_in_a_directory_another_uid_owns(tmp_path):
    path = tmp_path / "qm"
    path.mkdir(mode=0o755)
    os.chown(path, OTHER_UID, OTHER_UID)
    for allow in (False, True):
        with pytest.raises(errors.ForeignOwner):
            Store.open(path, create=True, allow_foreign_owner=allow)
    assert os.listdir(path) == [] and oct(path.stat().st_mode & 0o777) == "0o755"  # not even chmod
