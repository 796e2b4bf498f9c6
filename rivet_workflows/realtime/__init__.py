"""Realtime events over Channels (DESIGN.md section 7): consumer, routing and the channel-layer broadcaster."""
