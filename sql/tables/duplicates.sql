CREATE TABLE duplicates (source VARCHAR, source_key VARCHAR, question_id VARCHAR, kept_question_id VARCHAR, kind VARCHAR, evidence VARCHAR);
