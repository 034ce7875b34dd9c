CREATE TABLE question_tags (question_id VARCHAR, component VARCHAR, sub_component VARCHAR, source VARCHAR, weight BIGINT);
