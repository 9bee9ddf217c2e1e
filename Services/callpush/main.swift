print("callpush: not yet")
