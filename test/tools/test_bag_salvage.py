"""A recording its recorder never closed (killed, or its disk full; issue 27, round 3):
no metadata.yaml, an MCAP file without its end, perhaps cut inside a record. It is read up
to its last complete record, with a warning; before, the whole bag was lost."""

from __future__ import annotations

import shutil

import pytest

from helpers.extras import require_modules

require_modules("rosbags", why="bags are read with rosbags")

from wb_sim.tools.bag import bag_topics, open_bag  # noqa: E402
from wb_sim.tools.recording import RecordingError  # noqa: E402

PER_CHUNK = 100


def _killed_bag(tmp_path, chunks: int, cut: int = 0):
    """(a bag directory as a killed wb_sim_record leaves it: header + ``chunks`` closed
    chunks of PER_CHUNK messages on disk, ``cut`` bytes of a half-written record after them,
    no metadata.yaml; the closed bag, for comparison)."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    String = ts.types["std_msgs/msg/String"]
    full = tmp_path / "full"
    killed = tmp_path / "killed"
    killed.mkdir()
    with Writer(full, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=ts)
        for k in range(chunks * PER_CHUNK):
            writer.write(conn, 1_000_000 * (k + 1),
                         ts.serialize_cdr(String(data=f"message {k:06d} " + "x" * 200),
                                          "std_msgs/msg/String"))
            if (k + 1) % PER_CHUNK == 0:  # as wb_sim_record's sync() does every second
                writer.storage.close_chunk()
                writer.storage.bio.flush()
        writer.storage.bio.flush()
        mcap = full / "full.mcap"
        shutil.copy(mcap, killed / "killed.mcap")  # the file as it is before the close
        writer.write(conn, 10**12, b"\0" * 64)  # a message the kill loses
    if cut:
        with open(killed / "killed.mcap", "ab") as f:
            f.write(b"\x06" + (10**6).to_bytes(8, "little") + b"\0" * cut)
    return killed, full


@pytest.mark.parametrize("cut", [0, 300])
def test_a_killed_recording_is_read_up_to_its_last_chunk(tmp_path, cut):
    killed, full = _killed_bag(tmp_path, chunks=3, cut=cut)
    with pytest.warns(UserWarning, match=r"was not closed by its recorder .* read up to its "
                                         r"last complete record"):
        topics = bag_topics(killed)
    assert topics == {"/chatter": ("std_msgs/msg/String", 3 * PER_CHUNK)}
    with pytest.warns(UserWarning), open_bag(killed / "killed.mcap") as reader:
        got = [raw for _, _, raw in reader.messages(reader.connections)]
    with open_bag(full) as reader:
        want = [raw for _, _, raw in reader.messages(reader.connections)]
    assert got == want[:3 * PER_CHUNK]
    assert not list(tmp_path.glob("wb_sim_bag_*"))  # the repaired copy is removed


def test_a_killed_recording_with_no_chunk_is_empty_not_an_error(tmp_path):
    killed, _ = _killed_bag(tmp_path, chunks=0, cut=10)
    with pytest.warns(UserWarning):
        assert bag_topics(killed) == {}


def test_a_closed_bag_reads_without_warning(tmp_path, recwarn):
    _, full = _killed_bag(tmp_path, chunks=1)
    assert bag_topics(full) == {"/chatter": ("std_msgs/msg/String", PER_CHUNK + 1)}
    assert not [w for w in recwarn if "not closed" in str(w.message)]


def test_a_directory_of_two_unclosed_files_is_still_refused(tmp_path):
    (tmp_path / "a.mcap").write_bytes(b"\x89MCAP0\r\n")
    (tmp_path / "b.mcap").write_bytes(b"\x89MCAP0\r\n")
    with pytest.raises(RecordingError, match="no metadata.yaml"):
        bag_topics(tmp_path)
