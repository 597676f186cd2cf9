"""Money movements: deposits, withdrawals, transfers, bank accounts, settlement and bank files."""
