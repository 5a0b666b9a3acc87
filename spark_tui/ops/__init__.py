"""Operations: what a user does, as async functions that emit events."""
