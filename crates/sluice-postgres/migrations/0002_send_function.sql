-- Sluice's PostgreSQL schema, version 2: transactional enqueue.
--
-- `sluice_send` lets an application enqueue a message inside its own transaction: the message
-- exists if and only if that transaction commits, and long polls on every node wake when it
-- does (the NOTIFY is delivered at commit and dropped on rollback). It checks what the broker
-- checks for a send (sluice-core's `NewMessage::validate`, the queue's size limit, a delay
-- within retention) and raises an error otherwise, which aborts the caller's transaction.
--
--   SELECT sluice_send('orders', convert_to('{"id": 42}', 'UTF8'));
--   SELECT sluice_send('orders', '\x00ff'::bytea,
--                      attributes => '{"kind": {"type": "String", "value": "refund"}}',
--                      delay_ms => 60000, priority => 5, body_binary => true);
--
-- Attributes use the native API's shape: {"name": {"type": "String|Number|Binary[.label]",
-- "value": "..."}}, a Binary value in standard base64. `envelope` takes the optional fields
-- type, version, source, correlation_id and group_id. `body_binary` says whether receivers get
-- the body back as base64 (`body_base64`) or as text.
--
-- The function runs with the search_path it was created under (SET search_path FROM CURRENT),
-- so it finds Sluice's tables from any session that can resolve the function itself.
CREATE FUNCTION sluice_send(
    queue         text,
    body          bytea,
    attributes    jsonb   DEFAULT '{}',
    delay_ms      bigint  DEFAULT NULL,
    priority      integer DEFAULT 0,
    envelope      jsonb   DEFAULT '{}',
    body_binary   boolean DEFAULT false,
    deliver_at_ms bigint  DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_variable
DECLARE
    -- Limits, as named in sluice-core/src/limits.rs.
    priority_max             CONSTANT integer := 9;
    delay_ms_max             CONSTANT bigint  := 365::bigint * 24 * 60 * 60 * 1000;
    message_attributes_max   CONSTANT integer := 10;
    attribute_name_len_max   CONSTANT integer := 256;
    envelope_field_len_max   CONSTANT integer := 256;
    q            queues%ROWTYPE;
    now_ms       bigint := sluice_now_ms();
    visible_at   bigint;
    size_bytes   bigint := octet_length(body);
    new_id       uuid := gen_random_uuid();
    attr_name    text;
    attr         jsonb;
    attr_type    text;
    attr_value   text;
    field        text;
BEGIN
    SELECT * INTO q FROM queues WHERE name = queue;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'sluice_send: queue % does not exist', quote_literal(queue)
            USING ERRCODE = 'no_data_found';
    END IF;
    IF body IS NULL THEN
        RAISE EXCEPTION 'sluice_send: body must not be null' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF priority IS NULL OR priority < 0 OR priority > priority_max THEN
        RAISE EXCEPTION 'sluice_send: priority must be 0 to %', priority_max USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF delay_ms IS NOT NULL AND deliver_at_ms IS NOT NULL THEN
        RAISE EXCEPTION 'sluice_send: give delay_ms or deliver_at_ms, not both' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF delay_ms IS NOT NULL AND (delay_ms < 0 OR delay_ms > delay_ms_max) THEN
        RAISE EXCEPTION 'sluice_send: delay_ms must be 0 to %', delay_ms_max USING ERRCODE = 'invalid_parameter_value';
    END IF;

    attributes := coalesce(attributes, '{}');
    IF jsonb_typeof(attributes) <> 'object' THEN
        RAISE EXCEPTION 'sluice_send: attributes must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(attributes)) > message_attributes_max THEN
        RAISE EXCEPTION 'sluice_send: a message has at most % attributes', message_attributes_max
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR attr_name, attr IN SELECT key, value FROM jsonb_each(attributes) LOOP
        IF length(attr_name) > attribute_name_len_max
           OR attr_name !~ '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$' THEN
            RAISE EXCEPTION 'sluice_send: attribute name % is not 1 to % letters, digits, _, - and . (not leading, trailing or doubled)',
                quote_literal(attr_name), attribute_name_len_max USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF jsonb_typeof(attr) <> 'object' OR jsonb_typeof(attr -> 'type') IS DISTINCT FROM 'string'
           OR jsonb_typeof(attr -> 'value') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'sluice_send: attribute % must be {"type": "...", "value": "..."}', quote_literal(attr_name)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        attr_type := attr ->> 'type';
        attr_value := attr ->> 'value';
        CASE split_part(attr_type, '.', 1)
            WHEN 'String' THEN
                size_bytes := size_bytes + octet_length(attr_value);
            WHEN 'Number' THEN
                IF attr_value !~ '^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$' THEN
                    RAISE EXCEPTION 'sluice_send: attribute % is not a number', quote_literal(attr_name)
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
                size_bytes := size_bytes + octet_length(attr_value);
            WHEN 'Binary' THEN
                BEGIN
                    size_bytes := size_bytes + octet_length(decode(attr_value, 'base64'));
                EXCEPTION WHEN others THEN
                    RAISE EXCEPTION 'sluice_send: attribute % is not base64', quote_literal(attr_name)
                        USING ERRCODE = 'invalid_parameter_value';
                END;
            ELSE
                RAISE EXCEPTION 'sluice_send: attribute % has type %, not String, Number or Binary (optionally with a .label)',
                    quote_literal(attr_name), quote_literal(attr_type) USING ERRCODE = 'invalid_parameter_value';
        END CASE;
        size_bytes := size_bytes + octet_length(attr_name) + octet_length(attr_type);
    END LOOP;

    envelope := coalesce(envelope, '{}');
    IF jsonb_typeof(envelope) <> 'object' THEN
        RAISE EXCEPTION 'sluice_send: envelope must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR field, attr IN SELECT key, value FROM jsonb_each(envelope) LOOP
        IF field NOT IN ('type', 'version', 'source', 'correlation_id', 'group_id') THEN
            RAISE EXCEPTION 'sluice_send: envelope field % is not type, version, source, correlation_id or group_id',
                quote_literal(field) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF jsonb_typeof(attr) = 'null' THEN
            CONTINUE;
        END IF;
        IF jsonb_typeof(attr) <> 'string' OR octet_length(attr #>> '{}') NOT BETWEEN 1 AND envelope_field_len_max THEN
            RAISE EXCEPTION 'sluice_send: envelope field % must be a string of 1 to % bytes', quote_literal(field),
                envelope_field_len_max USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;

    IF size_bytes > q.message_bytes_max THEN
        RAISE EXCEPTION 'sluice_send: message is % bytes; queue % takes at most %', size_bytes, quote_literal(queue),
            q.message_bytes_max USING ERRCODE = 'program_limit_exceeded';
    END IF;
    visible_at := CASE
        WHEN deliver_at_ms IS NOT NULL THEN greatest(deliver_at_ms, now_ms)
        ELSE now_ms + coalesce(delay_ms, q.delay_ms)
    END;
    IF visible_at - now_ms >= q.retention_ms THEN
        RAISE EXCEPTION 'sluice_send: the message would become visible after the retention of queue % (% ms) ends',
            quote_literal(queue), q.retention_ms USING ERRCODE = 'invalid_parameter_value';
    END IF;

    INSERT INTO messages (queue_id, id, priority, sent_at, visible_at, size_bytes, group_id, body, body_binary,
                          attributes, envelope)
    VALUES (q.id, new_id, priority, now_ms, visible_at, size_bytes, envelope ->> 'group_id', body,
            coalesce(body_binary, false), attributes, envelope);
    -- Delivered when the caller commits, on every node; dropped if it rolls back.
    PERFORM pg_notify('sluice_wake_' || current_schema(), q.id::text);
    RETURN new_id;
END
$fn$;
