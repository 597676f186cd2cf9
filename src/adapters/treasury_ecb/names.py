"""The environment variables the ``ecb`` adapter reads (the plugin reads them; the rates name
them in their messages)."""

from __future__ import annotations

FETCH_SETTING = "TREASURY_ECB_FETCH"
URL_SETTING = "TREASURY_ECB_URL"
FILE_SETTING = "TREASURY_ECB_FILE"
MARKUP_SETTING = "TREASURY_ECB_MARKUP_BPS"
MAX_AGE_SETTING = "TREASURY_ECB_MAX_AGE_DAYS"
#: Every environment variable the ``ecb`` adapter reads.
SETTINGS = (FETCH_SETTING, URL_SETTING, FILE_SETTING, MARKUP_SETTING, MAX_AGE_SETTING)
