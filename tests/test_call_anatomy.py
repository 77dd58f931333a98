"""The anatomy of a call inside a graph (kdtree_lab.checks.call_anatomy), on synthetic kernel spans."""

import pytest

from kdtree_lab.checks.call_anatomy import KernelSpan, anatomy, short_name


def replayed(replays: int, calls: int, split_us: float, gap_us: float, combine_us: float, between_us: float):
    """Spans of ``replays`` replays of ``calls`` calls, each a split kernel, a gap and a combine (ns clock)."""
    spans, t = [], 1_000_000
    for _ in range(replays):
        for _ in range(calls):
            split = "void kdt::verify_sm120_e4m3_32_kernel<32>(kdt::Params)"
            spans.append(KernelSpan(split, t, t + int(split_us * 1e3)))
            t += int((split_us + gap_us) * 1e3)
            spans.append(KernelSpan("kdt::verify_reduce_kernel(kdt::Params)", t, t + int(combine_us * 1e3)))
            t += int((combine_us + between_us) * 1e3)
        t += 50_000  # between replays
    return spans[::-1]  # the profiler's order is not the clock's


def test_short_names_drop_namespaces_templates_and_parameters():
    assert short_name("void kdt::verify_sm120_e4m3_kernel<64>(kdt::Params)") == "verify_sm120_e4m3_kernel"
    assert short_name("kdt::verify_reduce_kernel(kdt::Params)") == "verify_reduce_kernel"


def test_durations_gaps_and_span_per_call():
    a = anatomy(replayed(4, 10, split_us=9.0, gap_us=-1.5, combine_us=3.0, between_us=0.5), replays=4, calls=10)
    assert a["kernels_per_call"] == 2
    assert a["kernels"]["verify_sm120_e4m3_32_kernel"] == {"per_call": 1, "median_us": 9.0}
    assert a["kernels"]["verify_reduce_kernel"]["median_us"] == 3.0
    assert a["gaps"]["verify_sm120_e4m3_32_kernel -> verify_reduce_kernel"]["median_us"] == -1.5
    assert a["gaps"]["verify_reduce_kernel -> verify_sm120_e4m3_32_kernel"] == {"count": 4 * 9, "median_us": 0.5}
    assert a["span_per_call_us"] == pytest.approx((10 * (9.0 - 1.5 + 3.0 + 0.5) - 0.5) / 10)


def test_spans_that_do_not_divide_into_the_replays_are_refused():
    spans = replayed(3, 2, 9.0, 1.0, 3.0, 0.5)
    with pytest.raises(ValueError, match="multiple of 5 replays x 2 calls, got 12"):
        anatomy(spans, replays=5, calls=2)
    with pytest.raises(ValueError, match="expected >= 1"):
        anatomy(spans, replays=0, calls=2)


def test_a_kernel_added_in_one_replay_and_dropped_in_another_is_refused():
    """The count still divides, so without the sequence check every attribution after the extra kernel would shift."""
    spans = sorted(replayed(4, 2, 9.0, 1.0, 3.0, 0.5), key=lambda s: s.start_ns)
    extra = KernelSpan("void at::native::vectorized_elementwise_kernel<4>(...)", spans[1].start_ns + 1,
                       spans[1].start_ns + 2)
    spans = spans[:4] + [extra] + spans[4:8] + spans[9:]  # replay 0 gains a kernel, replay 2 loses its first
    with pytest.raises(ValueError, match=r"replay 0 is not 2 x \(verify_sm120_e4m3_32_kernel, verify_reduce_kernel\)"):
        anatomy(spans, replays=4, calls=2)
