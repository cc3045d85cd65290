;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9835 of stock's instructions (133943106 against 136190330), kiln policy, 2026-11-30.
(decisions
  (benchmark libyaml)
  (values
    ("print_escaped @ main:132:13" inline)
    ("yaml_parser_fetch_next_token @ yaml_parser_fetch_more_tokens:46:14" no-inline)
    ("yaml_parser_fetch_stream_start @ yaml_parser_fetch_next_token:10:16" no-inline)
    ("yaml_parser_parse_flow_mapping_value @ yaml_parser_state_machine:68:20" inline)
    ("yaml_parser_parse_node @ yaml_parser_parse_flow_mapping_key:40:24" inline)
    ("yaml_parser_parse_node @ yaml_parser_parse_flow_mapping_value:23:20" inline)))
