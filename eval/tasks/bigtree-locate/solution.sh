grep -rn '^def reconcile_ledger_entries(' src
