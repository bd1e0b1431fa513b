"""What the tests share: factories, pilots, real servers and engines to test against."""
