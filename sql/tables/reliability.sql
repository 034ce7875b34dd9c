CREATE TABLE reliability (model VARCHAR, split VARCHAR, bin BIGINT, confidence DOUBLE, accuracy DOUBLE, n BIGINT);
