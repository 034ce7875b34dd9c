CREATE TABLE choices (question_id VARCHAR, position BIGINT, text VARCHAR, image_hash VARCHAR, original_position BIGINT);
