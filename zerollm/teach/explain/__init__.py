"""``zerollm explain``: an offline, interactive page built from zerollm's own numbers.

Modules: text (every sentence in 中文 and English), model_view (what a model does with a text),
page (the single HTML file: template page.html + data + a small font), fontsubset (how that font
is made). The command itself is zerollm.cli.commands.explain.
"""
