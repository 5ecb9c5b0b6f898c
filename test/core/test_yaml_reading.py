"""One YAML reader (wb_sim.config.read_yaml) for parameter files and campaign files: the same
numbers and the same errors from both. Until issue 25 each had its own loader: ``-.5e3`` was
a number in a parameter file and a string in a campaign, ``-e5`` crashed the parameter
reader (ValueError), ``._e5`` the campaign reader, and a campaign's syntax error was
PyYAML's several-line message where a parameter file's said line and column."""

from __future__ import annotations

import pytest

from wb_sim.config import read_yaml, read_yaml_params
from wb_sim.errors import ConfigError
from wb_sim.tools.campaign import load_campaign

NUMBERS = {"1e6": 1e6, "2.0e4": 2.0e4, "1e-3": 1e-3, "-1E+2": -100.0, "1.e5": 1e5,
           "-.5e3": -500.0, "+.5e1": 5.0, ".5e3": 500.0, "1_000e3": 1e6, "1.5": 1.5,
           "3": 3, ".inf": float("inf")}
STRINGS = ("-e5", ".e5", "+e5", "._e5", "e5", "1e", "1.5.e3")


@pytest.mark.parametrize("text", list(NUMBERS) + list(STRINGS))
def test_one_reading_of_numbers_in_both_kinds_of_file(tmp_path, text):
    params = tmp_path / "params.yaml"
    params.write_text(f"wb_sim:\n  ros__parameters:\n    x: {text}\n")
    value = read_yaml_params(params)["x"]
    assert value == NUMBERS.get(text, text) and type(value) is type(NUMBERS.get(text, text))
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(f"robot: humanoid\nx: {text}\n")
    assert read_yaml(campaign, "campaign file")["x"] == value


def test_a_campaign_takes_the_exponent_forms_a_parameter_file_takes(tmp_path):
    """``+.5e1`` was 'expected a number' in a campaign; ``._e5`` a ValueError traceback."""
    path = tmp_path / "c.yaml"
    path.write_text("robot: humanoid\nduration_s: +.5e1\nplots: false\n")
    assert load_campaign(path).spec["duration_s"] == 5.0
    path.write_text("robot: humanoid\nseed: ._e5\n")
    with pytest.raises(ConfigError, match=r"'seed': expected an integer, got '\._e5'"):
        load_campaign(path)


BAD = {
    "syntax": ("a: [1, 2\nb: 3\n", r"is not valid YAML: while parsing a flow sequence, expected "
                                   r"',' or '\]', but got ':' at line 2, column 2$"),
    "indentation": ("a: 1\n  b: 2\n", r"is not valid YAML: mapping values are not allowed here "
                                      r"at line 2, column 4$"),
    "not UTF-8": (b"a: \xff\n", r"is not valid YAML: not UTF-8 text \(byte 3"),
    "bad int": ("a: !!int abc\n", r"is not valid YAML: invalid literal for int"),
    "bad date": ("a: 2001-13-45\n", r"is not valid YAML: month must be in 1..12"),
    "python tag": ("a: !!python/object:os.system x\n", r"is not valid YAML: could not determine "
                                                      r"a constructor .* at line 1, column 4$"),
    "two documents": ("a: 1\n---\nb: 2\n", r"is not valid YAML: expected a single document in the "
                                         r"stream, but found another document at line 2, column 1$"),
}


@pytest.mark.parametrize("name", BAD)
def test_the_same_bad_file_the_same_error(tmp_path, name):
    content, pattern = BAD[name]
    path = tmp_path / "bad.yaml"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    with pytest.raises(ConfigError, match=pattern) as as_params:
        read_yaml_params(path)
    with pytest.raises(ConfigError, match=pattern) as as_campaign:
        load_campaign(path)
    assert str(as_params.value).startswith(f"parameter file '{path}' is not valid YAML: ")
    assert str(as_campaign.value).startswith(f"campaign file '{path}' is not valid YAML: ")
    assert (str(as_params.value).replace("parameter file", "", 1)
            == str(as_campaign.value).replace("campaign file", "", 1))


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_a_file_that_cannot_be_read_the_same_error(tmp_path, make):
    path = tmp_path / "x.yaml"
    if make == "directory":
        path.mkdir()
    with pytest.raises(ConfigError) as as_params:
        read_yaml_params(path)
    with pytest.raises(ConfigError) as as_campaign:
        load_campaign(path)
    assert str(as_params.value) == str(as_campaign.value).replace("campaign file",
                                                                  "parameter file", 1)
    assert str(as_params.value).startswith(f"cannot read parameter file '{path}': ")
