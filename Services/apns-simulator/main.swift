print("apns-simulator: not yet")
