"""The portal's tests."""
