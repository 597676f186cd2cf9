"""FX rates from the European Central Bank's euro reference rates (adapter name ``ecb``)."""

from treasury_ecb.fx import EcbFxRates
from treasury_ecb.rates import RatesFileError, RateTable, parse_rates
from treasury_ecb.source import RatesSourceError

__all__ = ["EcbFxRates", "RateTable", "RatesFileError", "RatesSourceError", "parse_rates"]
