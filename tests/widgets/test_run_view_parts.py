"""The RunView's parts without a view: its filters as values, its panes, the follower's refusal outside a loop."""

from __future__ import annotations

import math
import threading

import pytest
import traitlets

from rlviz_widgets.run.options import OpenOptions
from rlviz_widgets.widgets.run_view import panes
from rlviz_widgets.widgets.run_view.filters import condition, normalise_range, step_by
from rlviz_widgets.widgets.run_view.following import Follower


def test_ranges_are_normalised():
    assert normalise_range(None, "steps") is None
    assert normalise_range((1, 3), "steps") == (1.0, 3.0)
    assert normalise_range((-math.inf, math.inf), "reward") is None
    assert normalise_range((None, math.inf), "reward") is None
    assert normalise_range((math.inf, None), "reward") == (math.inf, None)
    for bad, says in (((math.nan, 1), "NaN"), (("a", 1), "a number or None"), (5, "a \\(lo, hi\\) pair")):
        with pytest.raises(traitlets.TraitError, match=says):
            normalise_range(bad, "reward")


def test_an_inverted_range_is_refused_as_open_run_refuses_it():
    """``filter(steps=(5, 1))`` became (1, 5) without a word, while ``open_run(steps=(5, 1))`` refused it."""
    with pytest.raises(ValueError) as opened:
        OpenOptions(steps=(5, 1))
    with pytest.raises(traitlets.TraitError) as viewed:
        normalise_range((5, 1), "steps")
    assert str(viewed.value) == str(opened.value) == "steps=(5, 1): the first step is after the last"
    with pytest.raises(traitlets.TraitError, match=r"reward=\(1.0, -1.0\): the first end is after the last"):
        normalise_range((1.0, -1.0), "reward")
    with pytest.raises(traitlets.TraitError, match="after the last"):
        normalise_range((math.inf, -math.inf), "reward")


def test_condition_of_the_filters():
    assert condition(None, None, "") == ""
    assert condition((1.0, None), (None, 0.5), "") == "step >= 1.0::DOUBLE AND reward <= 0.5::DOUBLE"
    assert condition(None, (math.inf, None), "x > 1 -- note") == "false AND (x > 1 -- note\n)"


def test_step_by_moves_within_the_steps():
    values = [0, 10, 20]
    assert step_by([], None, 1) is None
    assert step_by(values, None, 1) == 0 and step_by(values, None, -1) == 0
    assert step_by(values, 10, 1) == 20 and step_by(values, 10, -1) == 0
    assert step_by(values, 20, 1) == 20 and step_by(values, 5, 1) == 10 and step_by(values, 5, -1) == 0


def test_clip_says_how_much_it_cut():
    assert panes.clip("abc", 5) == "abc"
    assert panes.clip("abcdef", 2) == "ab… [4 more characters]"


def test_following_needs_an_event_loop():
    class View:
        follow, follow_interval = True, 1.0

    follower = Follower(View())
    said: list[str] = []

    def attempt() -> None:  # in a thread of its own: no event loop runs there (Playwright's may run in this one)
        try:
            follower.start()
        except RuntimeError as e:
            said.append(str(e))

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join()
    assert len(said) == 1 and "poll" in said[0]
    assert follower.task is None
    follower.stop()  # nothing to stop: no error
