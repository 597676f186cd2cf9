"""``python -m treasury_aiohttp.cli``: the ``treasury`` command without its script."""

from treasury_aiohttp.cli.commands import main

main()
