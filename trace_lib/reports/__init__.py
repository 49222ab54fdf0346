"""Campaign reports: progress (status), coverage and receipts (verify), and summaries against canonical."""
