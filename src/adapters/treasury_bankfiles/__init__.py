"""The bank-file rail (``TREASURY_BANK_RAIL=files``, extra ``bank-files``).

Withdrawals leave as ISO 20022 pain.001 credit-transfer files (written with sepaxml), and the
bank's account statements come back as camt.053 or camt.054 (read with the standard library's
ElementTree behind defusedxml) or SWIFT MT940 (read with mt-940). Account formats, validation
and virtual account details are the sandbox rail's; settlement is the bank's statement, never a
timer.
"""
