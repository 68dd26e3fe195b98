"""What the tests share, and bench/ and scripts/ import: live servers, raw-HTTP sessions, stores, waits."""
