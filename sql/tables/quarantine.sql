CREATE TABLE quarantine (source VARCHAR, source_key VARCHAR, stage VARCHAR, reason VARCHAR, detail VARCHAR);
