report("total_tokens", total_tokens)
report("scale", scale)
