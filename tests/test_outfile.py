"""Files written whole (mqcli/outfile.py): a temporary file next to the target, renamed over it
when complete, written through the descriptor that made it, so a name swapped meanwhile (a
directory another user may write: a textfile collector's) leads nowhere."""

import os
from pathlib import Path

import pytest

from mqcli.exits import UsageError
from mqcli.outfile import written_whole


def test_the_file_is_written_whole_and_renamed_over_the_target(tmp_path):
    target = tmp_path / "metrics.prom"
    target.write_text("old\n")
    with written_whole(target) as path:
        Path(path).write_text("new\n")
        assert target.read_text() == "old\n"  # not before it is whole
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.prom"]


def test_a_temporary_name_swapped_for_a_link_meanwhile_leads_nowhere(tmp_path):
    # whoever may write the directory renames the temporary file away and puts a link to
    # another file under its name before the writer opens it: root then truncated, filled and
    # chmodded that file, and renamed the link over the target
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    target = tmp_path / "metrics.prom"
    with pytest.raises(UsageError, match="was replaced or removed by someone else meanwhile"):
        with written_whole(target) as path:
            [tmp] = [p for p in tmp_path.iterdir() if p.name.startswith(".metrics.prom.")]
            tmp.rename(tmp_path / "moved-away")
            os.symlink(victim, tmp)
            with open(path, "w") as out:
                out.write("metrics\n")
            os.chmod(path, 0o644)
    assert victim.read_text() == "precious\n" and victim.stat().st_mode & 0o777 == 0o600
    assert not target.exists()
    assert (tmp_path / "moved-away").read_text() == "metrics\n"  # what was written went to the file made
