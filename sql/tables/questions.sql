CREATE TABLE questions (question_id VARCHAR, source VARCHAR, source_key VARCHAR, subject VARCHAR, grade VARCHAR,
  skill VARCHAR, problem VARCHAR, problem_original VARCHAR, problem_image VARCHAR, pic_prob BOOLEAN, pic_choice BOOLEAN,
  num_choices BIGINT, answer_idx BIGINT, shuffle VARCHAR, split VARCHAR, duplicate_group VARCHAR, source_split VARCHAR);
