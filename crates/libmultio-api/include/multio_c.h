/*
 * multio_c.h: MultIO's C API for fields, as fieldstore's libmultio-api.so implements it.
 *
 * The declarations are those of MultIO's own header (ecmwf/multio, src/multio/api/c/multio_c.h
 * and the headers it includes), so a program built against either header runs on either
 * library. Unlike MultIO's header (which includes <cstdbool> and <cstdint>), this one is valid C
 * as well as C++. What fieldstore does differently is in docs/multio-c.md.
 */
#ifndef FIELDSTORE_MULTIO_C_H
#define FIELDSTORE_MULTIO_C_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. fieldstore returns MULTIO_ERROR_ECKIT_EXCEPTION for every failure it reports
   (MultIO's own errors are eckit exceptions) and MULTIO_ERROR_UNKNOWN_EXCEPTION for an internal
   error; multio_error_string() has the text either way. */
enum MultioErrorValues
{
    MULTIO_SUCCESS = 0,
    MULTIO_ERROR_ECKIT_EXCEPTION = 1,
    MULTIO_ERROR_GENERAL_EXCEPTION = 2,
    MULTIO_ERROR_UNKNOWN_EXCEPTION = 3
};

/* Opaque types */
typedef struct multio_configuration_t multio_configuration_t;
typedef struct multio_metadata_t multio_metadata_t;
typedef struct multio_data_t multio_data_t;
typedef struct multio_handle_t multio_handle_t;
typedef struct multio_failure_info_t multio_failure_info_t;

/* Errors */
const char* multio_error_string(int err);
const char* multio_error_string_info(int err, multio_failure_info_t* info);
typedef void (*multio_failure_handler_t)(void* usercontext, int error_code, multio_failure_info_t* info);

/* Initialisation and versions */
int multio_initialise();
int multio_version(const char** version);
int multio_vcs_version(const char** sha1);

/* Handles */
int multio_new_handle_default(multio_handle_t** mio);
int multio_new_handle(multio_handle_t** mio, multio_configuration_t* cc);
int multio_delete_handle(multio_handle_t* mio);
int multio_handle_set_failure_handler(multio_handle_t* mio, multio_failure_handler_t handler, void* usercontext);
int multio_open_connections(multio_handle_t* mio);
int multio_close_connections(multio_handle_t* mio);

/* Configurations */
int multio_new_configuration(multio_configuration_t** cc);
int multio_new_configuration_from_filename(multio_configuration_t** cc, const char* configuration_file_name);
int multio_delete_configuration(multio_configuration_t* cc);
int multio_config_set_path(multio_configuration_t* cc, const char* configuration_path);
int multio_config_set_failure_handler(multio_configuration_t* config, multio_failure_handler_t handler,
                                      void* usercontext);
int multio_mpi_allow_world_default_comm(multio_configuration_t* cc, bool allow);
int multio_mpi_parent_comm(multio_configuration_t* cc, int parent_comm);
int multio_mpi_return_client_comm(multio_configuration_t* cc, int* return_client_comm);
int multio_mpi_return_server_comm(multio_configuration_t* cc, int* return_server_comm);

/* Data buffers */
int multio_data_new(multio_data_t** d, multio_handle_t* mio);
int multio_data_delete(multio_data_t* d);
int multio_data_zero(multio_data_t* d);
int multio_data_resize(multio_data_t* d, int new_size);
int multio_data_size(multio_data_t* d, int* size);
int multio_data_set_float_scalar(multio_data_t* d, float* value, int pos);
int multio_data_set_double_scalar(multio_data_t* d, double* value, int pos);
int multio_data_set_float_chunk(multio_data_t* d, float* value, int pos, int size);
int multio_data_set_double_chunk(multio_data_t* d, double* value, int pos, int size);

/* Data routing */
int multio_start_server(multio_configuration_t* cc);
int multio_flush(multio_handle_t* mio, multio_metadata_t* md);
int multio_notify(multio_handle_t* mio, multio_metadata_t* md);
int multio_synchronize(multio_handle_t* mio, multio_metadata_t* md);
int multio_write_parametrization(multio_handle_t* mio, multio_metadata_t* md);
int multio_write_parametrization_array_byte(multio_handle_t* mio, const char* key, const unsigned char* data, int size);
int multio_write_parametrization_array_int32(multio_handle_t* mio, const char* key, const int32_t* data, int size);
int multio_write_parametrization_array_int64(multio_handle_t* mio, const char* key, const int64_t* data, int size);
int multio_write_parametrization_array_real32(multio_handle_t* mio, const char* key, const float* data, int size);
int multio_write_parametrization_array_real64(multio_handle_t* mio, const char* key, const double* data, int size);
int multio_write_domain(multio_handle_t* mio, multio_metadata_t* md, int* data, int size);
int multio_write_mask_float(multio_handle_t* mio, multio_metadata_t* md, const float* data, int size);
int multio_write_mask_double(multio_handle_t* mio, multio_metadata_t* md, const double* data, int size);
int multio_write_field_float(multio_handle_t* mio, multio_metadata_t* md, const float* data, int size);
int multio_write_field_double(multio_handle_t* mio, multio_metadata_t* md, const double* data, int size);
int multio_write_grib_encoded(multio_handle_t* mio, void* gribdata, int gribsize);
int multio_write_field_buffer(multio_handle_t* mio, multio_metadata_t* md, multio_data_t* d, int byte_size);
int multio_field_accepted(multio_handle_t* mio, const multio_metadata_t* md, bool* accepted);

/* Metadata */
int multio_new_metadata(multio_metadata_t** md, multio_handle_t* mio);
int multio_copy_metadata(multio_metadata_t** md, multio_metadata_t* mdFrom);
int multio_delete_metadata(multio_metadata_t* md);
int multio_metadata_set_int(multio_metadata_t* md, const char* key, long long value);
int multio_metadata_set_string(multio_metadata_t* md, const char* key, const char* value);
int multio_metadata_set_bool(multio_metadata_t* md, const char* key, bool value);
int multio_metadata_set_double(multio_metadata_t* md, const char* key, double value);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FIELDSTORE_MULTIO_C_H */
