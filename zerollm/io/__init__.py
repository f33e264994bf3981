"""io: the ground floor. Errors, atomic files, directories that appear whole, locks, validation of
what is read back, argument ranges, hand-written arrays, safetensors, the docs-mode switch.

Imports nothing of zerollm outside this room: every other room may import it."""
