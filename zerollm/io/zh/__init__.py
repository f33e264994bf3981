"""中文 for the command line: each module here holds ``ZH = {English template: 中文 template}``.

A template is a message with its values written {0}, {1}, ... in the order they appear in the English
(scripts/zh_catalog.py lists the templates of every error message and what is still missing).
"""
