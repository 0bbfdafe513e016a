"""A compare function for the math-verify worker that hangs on demand (tests the hard timeout)."""

import time


def sleep_then_agree(predicted: str, reference: str) -> bool:
    if predicted == "hang":
        time.sleep(60)
    return predicted == reference
