"""io: the ground floor. Errors, atomic files, directories that appear whole, locks, validation of
what is read back, argument ranges, hand-written arrays, safetensors, the docs-mode switch, the language
(i18n) and the 中文 of every message (zh).

Imports nothing of zerollm outside this room: every other room may import it."""
