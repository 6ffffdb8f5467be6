"""A syntax error near the end of a JSON-array file is reported as what it is, with its field; only a file that
really ends early (or inside a string) is "cut short"."""

from __future__ import annotations

import pytest

from nlac_core.formats import FormatError, read

HEAD = '[{"task_id": 1, "reward": 0, "info": {}, '


@pytest.mark.parametrize("tail, message", [
    ('"traj": [1,]}]', "field 'traj[1]': malformed JSON: Expecting value (byte 52)"),
    ('"traj" []}]', "field 'traj': malformed JSON: Expecting ':' delimiter (byte 48)"),
    ('"traj": [', "field 'traj[0]': malformed JSON: the file is cut short (it ends at byte 50)"),
    ('"traj": ["a', "field 'traj[0]': malformed JSON: the file is cut short (it ends at byte 52)"),
])
def test_it_tells_a_syntax_error_from_a_cut_file(tmp_path, tail, message):
    path = tmp_path / "run.json"
    path.write_text(HEAD + tail)
    with pytest.raises(FormatError) as caught:
        list(read(path))
    assert str(caught.value) == f"run.json, record 0, {message}"
