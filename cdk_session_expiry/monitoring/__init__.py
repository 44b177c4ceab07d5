"""The construct's alarms and dashboard: the alarm defaults and helpers every unit uses (`alarms`)
and the operator's dashboard (`dashboard`). Any module of the construct may import `alarms`;
`dashboard` is imported by the construct alone.
"""
